# Demo models, built by the workflow itself from the demo corpus (no download):
# they let the real loading code run end to end offline. Not real models.


rule demo_asr_model:
    input:
        truth=DEMO_TRUTH,
    output:
        "resources/models/demo_asr.nemo",
    log:
        "resources/models/logs/demo_asr.log",
    conda:
        "../envs/asr.yaml"
    envmodules:
        "speechprep/asr",
    threads: 1  # speechprep.demo.asr_model trains on one thread
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        cmd=speechprep("asr"),
    shell:
        "{params.cmd} demo asr-model --truth {input.truth:q} --out {output:q} > {log:q} 2>&1"


rule demo_s2s_models:
    input:
        truth=DEMO_TRUTH,
    output:
        hubert="resources/models/demo_hubert_legacy.pt",
        kmeans="resources/models/demo_km.bin",
        vocoder="resources/models/demo_vocoder.pt",
        vocoder_config="resources/models/demo_vocoder.json",
    log:
        "resources/models/logs/demo_s2s.log",
    conda:
        "../envs/s2s.yaml"
    envmodules:
        "speechprep/s2s",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    params:
        cmd=speechprep("s2s"),
    shell:
        "{params.cmd} demo s2s-models --truth {input.truth:q} --out-dir resources/models > {log:q} 2>&1"
