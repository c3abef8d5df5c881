# speechprep: raw recordings -> VAD segments (and, stage by stage, transcripts,
# units and TTS features). See README.md; outputs follow docs/outputs.md.
from snakemake.utils import min_version, validate

min_version("9.0")
# the jobs' shell lines use bash (a list flag's file: speechprep.core.jobs.listed); this
# says so where bash is missing, instead of a syntax error from sh in the first list job
shell.executable("bash")


configfile: "config/config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"


check_config(config)
validate(config, "config/schema.yaml")


include: "rules/ingest.smk"
include: "rules/vad.smk"
include: "rules/diarize.smk"
include: "rules/music.smk"
include: "rules/models.smk"
include: "rules/asr.smk"
include: "rules/s2s.smk"
include: "rules/curate.smk"
include: "rules/tts.smk"
include: "rules/export.smk"
include: "rules/report.smk"
include: "rules/plan.smk"


rule all:
    default_target: True
    input:
        all_targets,
    localrule: True


# a part of rule all's targets (config targets_per_part: speechprep.workflow.plan.Plan.parts)
rule all_part:
    input:
        all_part,
    output:
        touch(f"{RESULTS}/_all/all/part-{{part}}.done"),
    wildcard_constraints:
        part=r"\d{5}",
    localrule: True
