# Curation: per shard, measure every segment (expensive, resumable); for the
# whole run, pseudo speakers over every dataset's shards (one speaker id space);
# per dataset, duplicates over every shard's measurements; per shard, keep or
# reject by thresholds (cheap); per dataset, a summary.
# Each job gets only its own keys of `curate`: a threshold change reruns
# `curate_decide` and what reads its output, not the measurements.


rule curate_measure:
    input:
        segments=f"{RESULTS}/{{ds}}/asr/{{shard}}.jsonl",
        units=f"{RESULTS}/{{ds}}/s2s/{{shard}}.units.jsonl",
    output:
        out=f"{RESULTS}/{{ds}}/curate/{{shard}}.measures.jsonl",
        embeddings=f"{RESULTS}/{{ds}}/curate/{{shard}}.embeddings.npy",
        minhash=f"{RESULTS}/{{ds}}/curate/{{shard}}.minhash.npy",
        fingerprint=f"{RESULTS}/{{ds}}/curate/{{shard}}.fingerprint.npy",
        rejects=f"{RESULTS}/{{ds}}/curate/{{shard}}.measure_rejects.jsonl",
    log:
        f"{RESULTS}/{{ds}}/logs/curate/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/curate/{{shard}}.tsv"
    conda:
        job_env("curate measure")
    envmodules:
        job_module("curate measure"),
    threads: config["curate"]["threads"]
    resources:
        mem_mb=shard_memory(
            "curate measure",
            "segments",
            PLAN.curate_model_files(),
            batch=config["curate"]["batch"],
            device=config["curate"]["device"],
        ),
        runtime=scaled(30, 60, of="segments"),
    params:
        cmd=job_cmd("curate measure"),
        p=job_params("curate measure"),
        resume=f"{RESULTS}/{{ds}}/curate/.partial/{{shard}}.jsonl",
    shell:
        job_shell("curate measure")


rule curate_annotate:
    input:
        segments=f"{RESULTS}/{{ds}}/asr/{{shard}}.jsonl",
    output:
        out=f"{RESULTS}/{{ds}}/curate/{{shard}}.annotations.jsonl",
        rejects=f"{RESULTS}/{{ds}}/curate/{{shard}}.annotation_rejects.jsonl",
    log:
        f"{RESULTS}/{{ds}}/logs/curate_annotate/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/curate_annotate/{{shard}}.tsv"
    conda:
        job_env("curate annotate")
    envmodules:
        job_module("curate annotate"),
    threads: 1
    resources:
        mem_mb=shard_memory(
            "curate annotate",
            "segments",
            batch=config["curate"]["batch"],
            device="cpu",
        ),
        runtime=scaled(15, 60, of="segments"),
    params:
        cmd=job_cmd("curate annotate"),
        p=job_params("curate annotate"),
        resume=f"{RESULTS}/{{ds}}/curate/.partial_annotate/{{shard}}.jsonl",
    shell:
        job_shell("curate annotate")


# The run-wide steps are checkpoints: a shard's job names its file of theirs once they have
# run, so one rewritten with the same bytes does not rerun it (speechprep/workflow/plan.py).
checkpoint curate_speakers:
    input:
        measures=every_shard(f"{RESULTS}/{{ds}}/curate/{{shard}}.measures.jsonl"),
        embeddings=every_shard(f"{RESULTS}/{{ds}}/curate/{{shard}}.embeddings.npy"),
    output:
        assignments=directory(
            expand(f"{RESULTS}/{{ds}}/curate/speaker_assignments", ds=list(config["datasets"]))
        ),
        dataset_clusters=expand(
            f"{RESULTS}/{{ds}}/curate/speaker_clusters.json", ds=list(config["datasets"])
        ),
        centroids_dir=directory(f"{RESULTS}/{ALL}/curate/speakers"),
        clusters=f"{RESULTS}/{ALL}/curate/speaker_clusters.json",
        centroids=f"{RESULTS}/{ALL}/curate/speaker_centroids.npy",
    log:
        f"{RESULTS}/{ALL}/logs/curate_speakers.log",
    conda:
        job_env("curate speakers")
    envmodules:
        job_module("curate speakers"),
    threads: 1
    resources:
        mem_mb=scaled(4000),
        runtime=scaled(60),
    params:
        cmd=job_cmd("curate speakers"),
        p=job_params("curate speakers"),
        datasets=lambda wc: list(config["datasets"]),
        shard_counts=lambda wc: PLAN.speaker_shard_counts(),
        assign=lambda wc: PLAN.speaker_assignment_files(),
    shell:
        job_shell("curate speakers")


checkpoint curate_duplicates:
    input:
        measures=per_shard(f"{RESULTS}/{{ds}}/curate/{{shard}}.measures.jsonl"),
        minhash=per_shard(f"{RESULTS}/{{ds}}/curate/{{shard}}.minhash.npy"),
        fingerprint=per_shard(f"{RESULTS}/{{ds}}/curate/{{shard}}.fingerprint.npy"),
    output:
        out=directory(f"{RESULTS}/{{ds}}/curate/duplicates"),
    log:
        f"{RESULTS}/{{ds}}/logs/curate_duplicates.log",
    conda:
        job_env("curate duplicates")
    envmodules:
        job_module("curate duplicates"),
    threads: 1
    resources:
        mem_mb=scaled(4000),
        runtime=scaled(60),
    params:
        cmd=job_cmd("curate duplicates"),
        p=job_params("curate duplicates"),
        out=lambda wc, output: PLAN.per_shard_paths(wc.ds, output.out, ".jsonl"),
        # the ids earlier runs searched: their copies stay kept (not an output: it outlives a rerun)
        seen=f"{RESULTS}/{{ds}}/curate/duplicates_seen.npy",
    shell:
        job_shell("curate duplicates")


rule curate_decide:
    input:
        unpack(lambda wc: PLAN.curate_decide_inputs(wc.ds, wc.shard)),
        measures=f"{RESULTS}/{{ds}}/curate/{{shard}}.measures.jsonl",
        measure_rejects=f"{RESULTS}/{{ds}}/curate/{{shard}}.measure_rejects.jsonl",
        annotations=f"{RESULTS}/{{ds}}/curate/{{shard}}.annotations.jsonl",
        exclude=lambda wc: [config["exclude"]] if config.get("exclude") else [],
    output:
        out=f"{RESULTS}/{{ds}}/curate/{{shard}}.jsonl",
        rejects=f"{RESULTS}/{{ds}}/curate/{{shard}}.rejects.jsonl",
    log:
        f"{RESULTS}/{{ds}}/logs/curate_decide/{{shard}}.log",
    conda:
        job_env("curate decide")
    envmodules:
        job_module("curate decide"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=scaled(15),
    params:
        cmd=job_cmd("curate decide"),
        p=job_params("curate decide"),
        exclude=lambda wc, input: flag_list("exclude", input.exclude),
    shell:
        job_shell("curate decide")


rule curate_summary:
    input:
        kept=per_shard(f"{RESULTS}/{{ds}}/curate/{{shard}}.jsonl"),
        rejects=per_shard(f"{RESULTS}/{{ds}}/curate/{{shard}}.rejects.jsonl"),
        clusters=f"{RESULTS}/{{ds}}/curate/speaker_clusters.json",
    output:
        summary=f"{RESULTS}/{{ds}}/curate/summary.json",
        speakers=f"{RESULTS}/{{ds}}/curate/speakers.jsonl",
    log:
        f"{RESULTS}/{{ds}}/logs/curate_summary.log",
    conda:
        job_env("curate summary")
    envmodules:
        job_module("curate summary"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    params:
        cmd=job_cmd("curate summary"),
        p=job_params("curate summary"),
        removed=f"{RESULTS}/{{ds}}/removed.jsonl",  # the ledger (not an output: kept across runs)
    shell:
        job_shell("curate summary")
