"""The Spark side of the whole-corpus stages, one module per stage as in ``dataprep``: each holds the
stage's Spark ``decide(df, stage, ctx) -> (rows, state)`` (``pipelines.global_runners`` maps the stage
classes to them), with the helpers they share in ``shared``."""
