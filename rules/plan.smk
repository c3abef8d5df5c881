import json

# The plan's memory probe (speechprep.workflow.probe): a run-wide job on synthetic inputs
# of {n} segments (ingest: lines), in the job's own environment. Targeted only by
# `python -m speechprep plan` after its pilot; never part of a run.


rule probe_ingest:
    output:
        f"{RESULTS}/{{ds}}/.probe/ingest/{{n}}.json",
    log:
        f"{RESULTS}/{{ds}}/logs/probe/ingest.{{n}}.log",
    wildcard_constraints:
        n=r"\d+",
    conda:
        job_env("ingest run")
    envmodules:
        job_module("ingest run"),
    resources:
        mem_mb=probe_memory,
    params:
        cmd=job_cmd("ingest run"),
        p=job_params("ingest run"),
        dir=f"{RESULTS}/{{ds}}/.probe/ingest/{{n}}.inputs",
    shell:
        probe_shell("ingest run")


rule probe_curate_duplicates:
    output:
        f"{RESULTS}/{{ds}}/.probe/curate_duplicates/{{n}}.json",
    log:
        f"{RESULTS}/{{ds}}/logs/probe/curate_duplicates.{{n}}.log",
    wildcard_constraints:
        n=r"\d+",
    conda:
        job_env("curate duplicates")
    envmodules:
        job_module("curate duplicates"),
    resources:
        mem_mb=probe_memory,
    params:
        cmd=job_cmd("curate duplicates"),
        p=job_params("curate duplicates"),
        dir=f"{RESULTS}/{{ds}}/.probe/curate_duplicates/{{n}}.inputs",
        like=lambda wc: json.dumps(
            {
                "minhash_perm": config["curate"]["minhash_perm"],
                "fingerprints": f"{RESULTS}/{wc.ds}/curate",
            }
        ),
    shell:
        probe_shell("curate duplicates", like=True)


rule probe_curate_speakers:
    output:
        f"{RESULTS}/.probe/curate_speakers/{{n}}.json",
    log:
        f"{RESULTS}/logs/probe/curate_speakers.{{n}}.log",
    wildcard_constraints:
        n=r"\d+",
    conda:
        job_env("curate speakers")
    envmodules:
        job_module("curate speakers"),
    resources:
        mem_mb=probe_memory,
    params:
        cmd=job_cmd("curate speakers"),
        p=job_params("curate speakers"),
        dir=f"{RESULTS}/.probe/curate_speakers/{{n}}.inputs",
    shell:
        probe_shell("curate speakers")
