"""Per-file speaker diarization on the speaker encoder the pipeline ships.

Plain functions on numpy audio and VAD segments, no workflow: :func:`diarize_file`
(:mod:`.core`) windows a file's speech with Resemblyzer (:mod:`.embed`), finds its
speakers (:mod:`.cluster`), their turns, change points and overlaps (:mod:`.turns`),
and decides what becomes of each VAD segment (kept, cut, ``multi_speaker``,
``overlap`` pieces); :mod:`.lines` turns that into segment lines and rejects;
:mod:`.rttm` writes and reads the turns as RTTM.
"""
