"""What every srv6pm service shares."""
