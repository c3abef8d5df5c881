"""The run's speaker model, measured on a lab's own labelled sample (:mod:`.calibrate`):
``python -m speechprep speakers calibrate``. Above the stages: it embeds with the encoders
and clusters as curation's speakers job does."""
