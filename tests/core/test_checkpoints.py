"""The rules' checkpoints are the ones the routing waits for and the status command names."""

import re
from pathlib import Path

from speechprep.workflow import status
from speechprep.workflow.plan import Plan
from tests.support import config

REPO = Path(__file__).resolve().parents[2]


def test_every_checkpoint_of_the_rules_is_waited_for_and_named():
    rules = [p.read_text(encoding="utf-8") for p in (REPO / "rules").glob("*.smk")]
    declared = {m for text in rules for m in re.findall(r"^checkpoint (\w+):", text, re.M)}
    cfg = config()
    cfg["tts"]["tokenizer"] = None
    cfg["stages"] = [*cfg["stages"], "export"]
    run_wide = {step for level in Plan(cfg, lambda ds: ["shard-0000"]).run_wide_steps() for step, _ in level}
    assert declared == run_wide | {"ingest"} == set(status.CHECKPOINTS)
