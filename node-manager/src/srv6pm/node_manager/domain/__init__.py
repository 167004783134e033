"""Pure domain core: the node's desired state, its validation, block maths. No I/O."""
