"""Human labels: the label model, label files, dataset converters, the labels table."""
