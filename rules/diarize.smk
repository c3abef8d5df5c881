# Diarization: per shard, speaker turns inside each file, its VAD segments cut at
# speaker changes and overlaps flagged (what ASR and S2S then read, for the
# datasets it runs for: diarize.enabled, datasets.<ds>.single_speaker); after
# curation's speakers, the turns as RTTM with the run's speaker ids.


rule diarize:
    input:
        segments=f"{RESULTS}/{{ds}}/vad/{{shard}}.segments.jsonl",
        models=lambda wc: PLAN.diarize_model_files(wc.ds),
    output:
        out=f"{RESULTS}/{{ds}}/diarize/{{shard}}.segments.jsonl",
        rejects=f"{RESULTS}/{{ds}}/diarize/{{shard}}.rejects.jsonl",
        turns=f"{RESULTS}/{{ds}}/diarize/{{shard}}.turns.jsonl",
        speakers=f"{RESULTS}/{{ds}}/diarize/{{shard}}.speakers.jsonl",
        stats=f"{RESULTS}/{{ds}}/diarize/{{shard}}.stats.jsonl",
    log:
        f"{RESULTS}/{{ds}}/logs/diarize/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/diarize/{{shard}}.tsv"
    conda:
        job_env("diarize run")
    envmodules:
        job_module("diarize run"),
    threads: config["diarize"]["threads"]
    resources:
        mem_mb=shard_memory("diarize run", "segments", lambda wc: PLAN.diarize_model_files(wc.ds)),
        runtime=scaled(20, 60, of="segments"),
    params:
        cmd=job_cmd("diarize run"),
        p=job_params("diarize run"),
        resume=f"{RESULTS}/{{ds}}/diarize/.partial/{{shard}}.jsonl",
    shell:
        job_shell("diarize run")


rule diarize_rttm:
    input:
        unpack(lambda wc: PLAN.diarize_rttm_inputs(wc.ds, wc.shard)),
    output:
        out=f"{RESULTS}/{{ds}}/diarize/{{shard}}.rttm",
    log:
        f"{RESULTS}/{{ds}}/logs/diarize_rttm/{{shard}}.log",
    conda:
        job_env("diarize rttm")
    envmodules:
        job_module("diarize rttm"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=scaled(15),
    params:
        cmd=job_cmd("diarize rttm"),
        p=job_params("diarize rttm"),
        measures=lambda wc, input: PLAN.diarize_rttm_flags(dict(input.items()))["measures"],
        assign=lambda wc, input: PLAN.diarize_rttm_flags(dict(input.items()))["assign"],
        centroids=lambda wc, input: PLAN.diarize_rttm_flags(dict(input.items()))["centroids"],
    shell:
        job_shell("diarize rttm")
