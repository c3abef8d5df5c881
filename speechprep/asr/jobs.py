"""The ASR stage's jobs (:mod:`speechprep.core.jobs`). ``asr run`` and ``asr given`` share
their flags: the rule picks one by the dataset's text mode (speechprep.workflow.plan)."""

from ..core.jobs import Memory, grammar_dirs, job, shard_files
from .params import AlignJobParams, AsrParams, GivenParams

TRANSCRIBE = dict(inputs="segments", outputs="out rejects", options="grammars* threads? resume align-rejects?")


@job("asr run", "asr", AsrParams, memory=Memory(1300, batch_mb_per_s=4.0, shard_mb_per_s=0.01), **TRANSCRIBE)
def run(f, p):
    """NeMo transcripts of one shard of segments (text: asr), or checked against the given text (verify)."""
    from . import verify

    verify.run(shard_files(f, passed=f.align_rejects), p, f.threads, grammar_dirs(f.grammars))


@job("asr given", "asr", GivenParams, **TRANSCRIBE)
def keep_given(f, p):
    """A text: given shard: each utterance keeps its given text; no model is loaded (torch is not imported)."""
    from . import given

    given.run(shard_files(f, passed=f.align_rejects), p)


@job(
    "asr align",
    "asr",
    AlignJobParams,
    inputs="segments",
    outputs="out rejects",
    options="grammars* threads? resume",
    # the ASR model and the text-normalisation grammars (bench/asr/align_memory.py); per audio second, the
    # longest recording's kept log-probabilities and greedy tokens (a 2-hour one: 926 MB peak against
    # 832 MB for 10 minutes, docs/benchmarks.md), with headroom
    memory=Memory(1300, batch_mb_per_s=0.05),
)
def align(f, p):
    """Long recordings with their text aligned and cut into utterances (the shard's other lines pass)."""
    from . import longform

    longform.run(f.segments, f.out, f.rejects, f.resume, p, grammar_dirs(f.grammars), f.threads)


@job("asr merge", "asr", inputs="shards+ rejects+", outputs="manifest summary")
def merge(f, p):
    """Every shard's transcripts in one manifest, and a summary."""
    from . import stage

    stage.merge(f.shards, f.rejects, f.manifest, f.summary)
