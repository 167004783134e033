"""srv6pm controller: REST API, desired state in SQL, reconciler."""
