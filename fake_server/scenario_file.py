"""The scenario file format, kept importable here for scripts written against it (docs/scenarios.md).

The format lives in :mod:`contracts.scenario_file`, beside the scenario model.
"""

from contracts.scenario_file import ScenarioError, dump, dumps, load, loads, split_text, to_dict

__all__ = ["ScenarioError", "dump", "dumps", "load", "loads", "split_text", "to_dict"]
