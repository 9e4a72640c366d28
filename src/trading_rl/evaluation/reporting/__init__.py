"""Reporting: tearsheets, plots, the end-of-run summary and the comparison of two validation reports."""
