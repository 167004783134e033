"""Data plane drivers: one interface, one implementation per data plane."""
