# Ingest: list or read a dataset, probe headers, write the manifest and shards.
# A checkpoint: the shard count is known only once the corpus has been read.
# A corpus in its own layout (kaldi, common_voice, ...): its tables and manifests
# are the inputs (speechprep.ingest.sources.source_files).
# Shard files whose content did not change keep their checksum, so their
# downstream jobs do not rerun (see max-checksum-file-size in the profiles).


checkpoint ingest:
    input:
        lambda wc: (
            [config["datasets"][wc.ds]["manifest"]]
            if config["datasets"][wc.ds].get("manifest")
            else source_files(config["datasets"][wc.ds])
        ),
        exclude=lambda wc: [config["exclude"]] if config.get("exclude") else [],
    output:
        manifest=f"{RESULTS}/{{ds}}/manifest.jsonl",
        rejects=f"{RESULTS}/{{ds}}/rejects/ingest.jsonl",
        shards=directory(f"{RESULTS}/{{ds}}/shards"),
    log:
        f"{RESULTS}/{{ds}}/logs/ingest.log",
    conda:
        job_env("ingest run")
    envmodules:
        job_module("ingest run"),
    threads: config["ingest"]["threads"]
    resources:
        mem_mb=scaled(4000),
        runtime=scaled(60),
    params:
        cmd=job_cmd("ingest run"),
        p=job_params("ingest run"),
        inventory=lambda wc: inventory(wc.ds),
    shell:
        job_shell("ingest run")
