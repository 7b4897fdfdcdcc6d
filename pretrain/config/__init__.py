"""Model and training configs: one YAML file each, validated with clear errors, one module per section.

``pretrain size``/``pretrain plan`` write them; ``pretrain train`` reads them (``loading``). A training config
names its model config by path (relative to the training config's folder) or inlines it under ``model:``.
"""
