"""A row's result (pure): result types, normalization, row → result, the agent output."""
