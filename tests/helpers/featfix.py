"""Feature-dir fixtures: the library's toy feature dir and the train/dev/tokenizer task built from it."""

from asrtrain.features.toy import WORDS, make_feat_dir, make_task  # noqa: F401 - re-exported for the tests
