"""Configuration: the typed, frozen dataclasses (:mod:`.schema`), YAML files and ``--set`` overrides
(:mod:`.file`, :mod:`.yamlio`), and the check of an exp dir's stored config (:mod:`.check`).

``from asrtrain.config import Config, TrainConfig, ...`` reads the dataclasses; the loaders live in their
own modules, so importing the schema never imports YAML.
"""

from asrtrain.config.schema import (Config, DPConfig, DecodeConfig, DistConfig, FeatureConfig, ModelConfig,
                                    SpecAugConfig, TokenizerConfig, TrainConfig)

__all__ = ["Config", "DPConfig", "DecodeConfig", "DistConfig", "FeatureConfig", "ModelConfig", "SpecAugConfig",
           "TokenizerConfig", "TrainConfig"]
