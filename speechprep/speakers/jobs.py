"""The speaker model's jobs (:mod:`speechprep.core.jobs`): run by hand, no rule."""

from ..core.jobs import job


@job("speakers calibrate", "curate", options="configfile* manifest out split? threads?")
def calibrate(f, p):
    """Choose speakers.model's thresholds on one part of a labelled sample (lines: audio_filepath,
    speaker, optional offset/duration, file_id, source; a conversation's: turns instead of
    speaker) and report them on the other, split by speaker or by source; write them as a
    speakers: block a further --configfile takes."""
    from . import calibrate

    calibrate.run(f.configfile or [], f.manifest, f.out, f.split or "auto", int(f.threads or 1))
