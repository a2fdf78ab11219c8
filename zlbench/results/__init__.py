"""Result schema and readers: zlbench run dirs (events -> rows, ops status) and FlagGems result logs."""
