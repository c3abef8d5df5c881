# Demo models, built by the workflow itself from the demo corpus (no download):
# they let the real loading code run end to end offline. Not real models.


rule demo_asr_model:
    input:
        truth=DEMO_TRUTH,
    output:
        out="resources/models/demo_asr.nemo",
    log:
        "resources/models/logs/demo_asr.log",
    conda:
        job_env("demo asr-model")
    envmodules:
        job_module("demo asr-model"),
    threads: 1  # speechprep.demo.asr_model trains on one thread
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        cmd=job_cmd("demo asr-model"),
    shell:
        job_shell("demo asr-model")


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
        job_env("demo s2s-models")
    envmodules:
        job_module("demo s2s-models"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    params:
        cmd=job_cmd("demo s2s-models"),
        out_dir=lambda wc, output: os.path.dirname(output.hubert),
    shell:
        job_shell("demo s2s-models")
