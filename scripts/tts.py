#!/usr/bin/env python3
"""TTS features (rules/tts.smk): one subcommand per rule.

  tokenizer  train the SentencePiece tokenizer on every dataset's transcripts
  features   codes, condition and emotion vectors of one shard (resumable)
  text       text ids of one shard's accepted segments
  manifest   a dataset's train/val manifests and stats.json
  combined   train/val manifests and stats across datasets
"""
import argparse
import json
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from speechprep.envspec import require_stage_env  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("tokenizer")
    t.add_argument("--manifests", required=True, help='JSON {"<ds>": "<ds>/asr/manifest.jsonl"}')
    t.add_argument("--languages", default="{}", help='JSON {"<ds>": "<language>"}')
    t.add_argument("--params", required=True, help="the config's tts section, as JSON")
    t.add_argument("--model", required=True)

    f = sub.add_parser("features")
    f.add_argument("--segments", required=True, help="asr/<shard>.jsonl")
    f.add_argument("--units", required=True, help="s2s/<shard>.units.jsonl")
    f.add_argument("--s2s-rejects", help="s2s/<shard>.rejects.jsonl (reasons for missing units)")
    f.add_argument("--params", required=True)
    f.add_argument("--threads", type=int, default=1)
    f.add_argument("--scratch", required=True)
    f.add_argument("--index", required=True)
    f.add_argument("--rejects", required=True)
    f.add_argument("--out-dir", required=True, help="tts/<shard>: gets codes/, condition/, emo_vec/")

    x = sub.add_parser("text")
    x.add_argument("--index", required=True, help="tts/<shard>.features.jsonl")
    x.add_argument("--tokenizer", required=True)
    x.add_argument("--out", required=True)
    x.add_argument("--ids-dir", required=True)

    m = sub.add_parser("manifest")
    m.add_argument("--dataset", required=True)
    m.add_argument("--config", required=True, help="the workflow config, as JSON")
    m.add_argument("--tokenizer", required=True)
    m.add_argument("--features", nargs="*", default=[])
    m.add_argument("--texts", nargs="*", default=[])
    m.add_argument("--rejects", nargs="*", default=[])
    m.add_argument("--train", required=True)
    m.add_argument("--val", required=True)
    m.add_argument("--stats", required=True)

    c = sub.add_parser("combined")
    c.add_argument("--stats-in", nargs="+", required=True)
    c.add_argument("--train-in", nargs="+", required=True)
    c.add_argument("--val-in", nargs="+", required=True)
    c.add_argument("--train", required=True)
    c.add_argument("--val", required=True)
    c.add_argument("--stats", required=True)

    a = ap.parse_args()
    require_stage_env("tts")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
    from speechprep import tts

    if a.cmd == "tokenizer":
        p = json.loads(a.params)
        tts.train_corpus_tokenizer(json.loads(a.manifests), json.loads(a.languages), p.get("languages") or {},
                                   int(p["vocab_size"]), a.model)
    elif a.cmd == "features":
        import torch

        from speechprep.failures import EXIT_CODE, SystematicFailure

        torch.set_num_threads(max(1, a.threads))
        try:
            tts.run_features(a.segments, a.units, a.s2s_rejects, a.index, a.rejects, a.out_dir,
                             tts.TtsParams.from_dict(json.loads(a.params)), a.scratch, a.threads)
        except SystematicFailure as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(EXIT_CODE)
    elif a.cmd == "text":
        tts.run_text(a.index, a.tokenizer, a.out, a.ids_dir)
    elif a.cmd == "manifest":
        stats = tts.build_manifests(a.dataset, a.features, a.texts, a.rejects, a.tokenizer, json.loads(a.config),
                                    a.train, a.val, a.stats)
        print(f"tts[{a.dataset}]: {stats['counts']}, hours {stats['hours']}", file=sys.stderr)
    else:
        stats = tts.combine(a.stats_in, a.train_in, a.val_in, a.train, a.val, a.stats)
        print(f"tts (all datasets): {stats['counts']}, hours {stats['hours']}", file=sys.stderr)


if __name__ == "__main__":
    main()
