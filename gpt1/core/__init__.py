"""What every package uses: one-line errors, atomic writes, a run directory's lock and records, progress, memory."""
