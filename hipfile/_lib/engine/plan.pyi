"""A submission planned: nothing here is called from Python."""
