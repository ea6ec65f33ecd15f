"""YAML as our configs need it: PyYAML's safe loader, refusing a key given twice in one mapping.

PyYAML keeps the last of two equal keys silently; a config with ``lr: 0.1`` twice is a mistake we name.
"""

from __future__ import annotations

from typing import Any

import yaml


class _StrictLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        if isinstance(node, yaml.MappingNode):
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    continue  # reported by PyYAML itself
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key '{key}' (first on line {seen[key] + 1})",
                        key_node.start_mark)
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


def strict_yaml_load(text: str) -> Any:
    """``yaml.safe_load`` that refuses duplicate keys."""
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
