# Diarization: per shard, speaker turns inside each file, its VAD segments cut at
# speaker changes and overlaps flagged (what ASR and S2S then read, for the
# datasets it runs for: diarize.enabled, datasets.<ds>.single_speaker); after
# curation's speakers, the turns as RTTM with the run's speaker ids.


rule diarize:
    input:
        segments=f"{RESULTS}/{{ds}}/vad/{{shard}}.segments.jsonl",
    output:
        segments=f"{RESULTS}/{{ds}}/diarize/{{shard}}.segments.jsonl",
        rejects=f"{RESULTS}/{{ds}}/diarize/{{shard}}.rejects.jsonl",
        turns=f"{RESULTS}/{{ds}}/diarize/{{shard}}.turns.jsonl",
        speakers=f"{RESULTS}/{{ds}}/diarize/{{shard}}.speakers.jsonl",
        stats=f"{RESULTS}/{{ds}}/diarize/{{shard}}.stats.jsonl",
    log:
        f"{RESULTS}/{{ds}}/logs/diarize/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/diarize/{{shard}}.tsv"
    conda:
        "../envs/curate.yaml"
    envmodules:
        "speechprep/curate",
    threads: config["diarize"]["threads"]
    resources:
        mem_mb=shard_memory("diarize", "segments"),
        runtime=scaled(20, 60, of="segments"),
    params:
        cmd=speechprep("curate"),
        p=job_params("diarize run"),
        resume=f"{RESULTS}/{{ds}}/diarize/.partial/{{shard}}.jsonl",
    shell:
        "{params.cmd} diarize run --segments {input.segments:q} --params {params.p:q} --threads {threads}"
        " --resume {params.resume:q} --out {output.segments:q} --rejects {output.rejects:q}"
        " --turns {output.turns:q} --speakers {output.speakers:q} --stats {output.stats:q} > {log:q} 2>&1"


rule diarize_rttm:
    input:
        unpack(lambda wc: PLAN.diarize_rttm_inputs(wc.ds, wc.shard)),
    output:
        rttm=f"{RESULTS}/{{ds}}/diarize/{{shard}}.rttm",
    log:
        f"{RESULTS}/{{ds}}/logs/diarize_rttm/{{shard}}.log",
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
        p=job_params("diarize rttm"),
        run=lambda wc, input: PLAN.diarize_rttm_flags(wc.shard, dict(input.items())),
    shell:
        "{params.cmd} diarize rttm --turns {input.turns:q} --speakers {input.speakers:q} --out {output.rttm:q}"
        " {params.run} --params {params.p:q} > {log:q} 2>&1"
