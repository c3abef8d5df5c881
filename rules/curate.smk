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
        measures=f"{RESULTS}/{{ds}}/curate/{{shard}}.measures.jsonl",
        embeddings=f"{RESULTS}/{{ds}}/curate/{{shard}}.embeddings.npy",
        minhash=f"{RESULTS}/{{ds}}/curate/{{shard}}.minhash.npy",
        fingerprint=f"{RESULTS}/{{ds}}/curate/{{shard}}.fingerprint.npy",
        rejects=f"{RESULTS}/{{ds}}/curate/{{shard}}.measure_rejects.jsonl",
    log:
        f"{RESULTS}/{{ds}}/logs/curate/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/curate/{{shard}}.tsv"
    conda:
        "../envs/curate.yaml"
    envmodules:
        "speechprep/curate",
    threads: config["curate"]["threads"]
    resources:
        mem_mb=shard_memory("curate", "segments", batch_seconds=config["curate"]["batch_seconds"]),
        runtime=scaled(30, 60, of="segments"),
    params:
        cmd=speechprep("curate"),
        p=job_params("curate measure"),
        resume=f"{RESULTS}/{{ds}}/curate/.partial/{{shard}}.jsonl",
    shell:
        "{params.cmd} curate measure --segments {input.segments:q} --units {input.units:q}"
        " --params {params.p:q} --threads {threads} --resume {params.resume:q}"
        " --out {output.measures:q} --embeddings {output.embeddings:q} --minhash {output.minhash:q}"
        " --fingerprint {output.fingerprint:q} --rejects {output.rejects:q} > {log:q} 2>&1"


rule curate_speakers:
    input:
        measures=every_shard(f"{RESULTS}/{{ds}}/curate/{{shard}}.measures.jsonl"),
        embeddings=every_shard(f"{RESULTS}/{{ds}}/curate/{{shard}}.embeddings.npy"),
    output:
        assign=directory(
            expand(f"{RESULTS}/{{ds}}/curate/speaker_assignments", ds=list(config["datasets"]))
        ),
        clusters=expand(
            f"{RESULTS}/{{ds}}/curate/speaker_clusters.json", ds=list(config["datasets"])
        ),
        centroids=directory(f"{RESULTS}/{ALL}/curate/speakers"),
        run_clusters=f"{RESULTS}/{ALL}/curate/speaker_clusters.json",
    log:
        f"{RESULTS}/{ALL}/logs/curate_speakers.log",
    conda:
        "../envs/curate.yaml"
    envmodules:
        "speechprep/curate",
    threads: 1
    resources:
        mem_mb=scaled(4000),
        runtime=scaled(60),
    params:
        cmd=speechprep("curate"),
        p=job_params("curate speakers"),
        datasets=lambda wc: PLAN.speaker_job_args(),
    shell:
        "{params.cmd} curate speakers {params.datasets} --measures {input.measures:q}"
        " --embeddings {input.embeddings:q} --dataset-clusters {output.clusters:q}"
        " --centroids-dir {output.centroids:q} --clusters {output.run_clusters:q}"
        " --params {params.p:q} > {log:q} 2>&1"


rule curate_duplicates:
    input:
        measures=per_shard(f"{RESULTS}/{{ds}}/curate/{{shard}}.measures.jsonl"),
        minhash=per_shard(f"{RESULTS}/{{ds}}/curate/{{shard}}.minhash.npy"),
        fingerprint=per_shard(f"{RESULTS}/{{ds}}/curate/{{shard}}.fingerprint.npy"),
    output:
        out=directory(f"{RESULTS}/{{ds}}/curate/duplicates"),
    log:
        f"{RESULTS}/{{ds}}/logs/curate_duplicates.log",
    conda:
        "../envs/curate.yaml"
    envmodules:
        "speechprep/curate",
    threads: 1
    resources:
        mem_mb=scaled(4000),
        runtime=scaled(60),
    params:
        cmd=speechprep("curate"),
        p=job_params("curate duplicates"),
        out=lambda wc, output: PLAN.per_shard_paths(wc.ds, output.out, ".jsonl"),
    shell:
        "{params.cmd} curate duplicates --measures {input.measures:q} --minhash {input.minhash:q}"
        " --fingerprint {input.fingerprint:q} --out {params.out} --params {params.p:q} > {log:q} 2>&1"


rule curate_decide:
    input:
        measures=f"{RESULTS}/{{ds}}/curate/{{shard}}.measures.jsonl",
        measure_rejects=f"{RESULTS}/{{ds}}/curate/{{shard}}.measure_rejects.jsonl",
        assign=f"{RESULTS}/{{ds}}/curate/speaker_assignments",
        duplicates=f"{RESULTS}/{{ds}}/curate/duplicates",
    output:
        kept=f"{RESULTS}/{{ds}}/curate/{{shard}}.jsonl",
        rejects=f"{RESULTS}/{{ds}}/curate/{{shard}}.rejects.jsonl",
    log:
        f"{RESULTS}/{{ds}}/logs/curate_decide/{{shard}}.log",
    conda:
        "../envs/curate.yaml"
    envmodules:
        "speechprep/curate",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=scaled(15),
    params:
        cmd=speechprep("curate"),
        p=job_params("curate decide"),
    shell:
        "{params.cmd} curate decide --measures {input.measures:q} --measure-rejects {input.measure_rejects:q}"
        " --speakers {input.assign:q}/{wildcards.shard}.jsonl --duplicates {input.duplicates:q}/{wildcards.shard}.jsonl"
        " --params {params.p:q} --out {output.kept:q} --rejects {output.rejects:q} > {log:q} 2>&1"


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
        "../envs/curate.yaml"
    envmodules:
        "speechprep/curate",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    params:
        cmd=speechprep("curate"),
    shell:
        "{params.cmd} curate summary --kept {input.kept:q} --rejects {input.rejects:q}"
        " --clusters {input.clusters:q} --summary {output.summary:q} --speakers {output.speakers:q}"
        " > {log:q} 2>&1"
