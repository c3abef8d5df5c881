# S2S: HuBERT units per shard of VAD segments, and unit HiFi-GAN resynthesis.


rule s2s:
    input:
        segments=f"{RESULTS}/{{ds}}/vad/{{shard}}.segments.jsonl",
        models=s2s_model_files,
    output:
        units=f"{RESULTS}/{{ds}}/s2s/{{shard}}.units.jsonl",
        rejects=f"{RESULTS}/{{ds}}/s2s/{{shard}}.rejects.jsonl",
        wavs=directory(f"{RESULTS}/{{ds}}/s2s/{{shard}}"),
    log:
        f"{RESULTS}/{{ds}}/logs/s2s/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/s2s/{{shard}}.tsv"
    conda:
        "../envs/s2s.yaml"
    envmodules:
        "speechprep/s2s",
    threads: config["s2s"]["threads"]
    resources:
        mem_mb=scaled(6000, 200, of="segments"),
        runtime=scaled(30, 120, of="segments"),
    params:
        cmd=speechprep("s2s"),
        s2s=lambda wc: stage_params("s2s", wc.ds),
        resume=f"{RESULTS}/{{ds}}/s2s/.partial/{{shard}}.jsonl",
    shell:
        "{params.cmd} s2s run --segments {input.segments:q} --params {params.s2s:q} --threads {threads}"
        " --resume {params.resume:q} --units {output.units:q} --wav-dir {output.wavs:q}"
        " --rejects {output.rejects:q} > {log:q} 2>&1"
