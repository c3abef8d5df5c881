"""Music under speech: detection per segment (detect), and separation where it pays."""
