# Export: per dataset, the TTS manifests' lines (the final kept set) cut per shard,
# with the dataset's Parquet column types (a checkpoint: a grown corpus rewrites an
# old shard's lines with the same bytes and its export job does not run again); per
# shard, its segments in every format of export.formats (one job writes them all
# from one FLAC cut per segment); then, per format, the dataset's index.jsonl and
# stats.json, and what the format's loader reads for the whole dataset (the Parquet
# dataset card; NeMo's manifest of all shards, its config keys in stats.json).


checkpoint export_lines:
    input:
        manifests=[
            f"{RESULTS}/{{ds}}/tts/train_manifest.jsonl",
            f"{RESULTS}/{{ds}}/tts/val_manifest.jsonl",
        ],
        features=per_shard(f"{RESULTS}/{{ds}}/tts/{{shard}}.features.jsonl"),
    output:
        out=directory(f"{RESULTS}/{{ds}}/export/.lines"),
    log:
        f"{RESULTS}/{{ds}}/logs/export_lines.log",
    conda:
        job_env("export lines")
    envmodules:
        job_module("export lines"),
    threads: 1
    resources:
        mem_mb=scaled(4000),
        runtime=scaled(15),
    params:
        cmd=job_cmd("export lines"),
        out=lambda wc, output: PLAN.per_shard_paths(wc.ds, output.out, ".jsonl"),
        columns=lambda wc, output: f"{output.out}/columns.json",
    shell:
        job_shell("export lines")


rule export_shard:
    input:
        unpack(lambda wc: PLAN.export_shard_inputs(wc.ds, wc.shard)),
        features=f"{RESULTS}/{{ds}}/tts/{{shard}}.features.jsonl",
    output:
        # written last, after the shard's containers (webdataset/<shard>.tar,
        # parquet/data/train-<nnnnnn>.parquet, lhotse_shar/data/<field>.<nnnnnn>.*,
        # nemo_tarred/audio_<n>.tar and manifest_<n>.json)
        indexes=[
            f"{RESULTS}/{{ds}}/export/{fmt}/{{shard}}.index.jsonl"
            for fmt in config["export"]["formats"]
        ],
        rejects=f"{RESULTS}/{{ds}}/export/{{shard}}.rejects.jsonl",
    log:
        f"{RESULTS}/{{ds}}/logs/export/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/export/{{shard}}.tsv"
    conda:
        job_env("export shard")
    envmodules:
        job_module("export shard"),
    threads: 1
    resources:
        mem_mb=shard_memory("export shard", "features"),
        runtime=scaled(15, 60, of="features"),
    params:
        cmd=job_cmd("export shard"),
        p=job_params("export shard"),
        resume=f"{RESULTS}/{{ds}}/export/.partial/{{shard}}.jsonl",
        out_dir=f"{RESULTS}/{{ds}}/export",
    shell:
        job_shell("export shard")


rule export_summary:
    input:
        indexes=lambda wc: expand(
            f"{RESULTS}/{wc.ds}/export/{wc.fmt}/{{shard}}.index.jsonl", shard=shards(wc.ds)
        ),
    output:
        index=f"{RESULTS}/{{ds}}/export/{{fmt}}/index.jsonl",
        stats=f"{RESULTS}/{{ds}}/export/{{fmt}}/stats.json",
    log:
        f"{RESULTS}/{{ds}}/logs/export_summary/{{fmt}}.log",
    wildcard_constraints:
        fmt="webdataset|lhotse_shar",
    conda:
        job_env("export summary")
    envmodules:
        job_module("export summary"),
    threads: 1
    resources:
        mem_mb=scaled(2000),
        runtime=scaled(15),
    params:
        cmd=job_cmd("export summary"),
        p=job_params("export summary"),
        format=lambda wc: f"--format {wc.fmt}",
    shell:
        job_shell("export summary")


use rule export_summary as export_summary_parquet with:
    output:
        index=f"{RESULTS}/{{ds}}/export/{{fmt}}/index.jsonl",
        stats=f"{RESULTS}/{{ds}}/export/{{fmt}}/stats.json",
        card=f"{RESULTS}/{{ds}}/export/{{fmt}}/README.md",
    wildcard_constraints:
        fmt="parquet",


use rule export_summary as export_summary_nemo with:
    output:
        index=f"{RESULTS}/{{ds}}/export/{{fmt}}/index.jsonl",
        stats=f"{RESULTS}/{{ds}}/export/{{fmt}}/stats.json",
        manifest=f"{RESULTS}/{{ds}}/export/{{fmt}}/tarred_audio_manifest.json",
    wildcard_constraints:
        fmt="nemo_tarred",
