//! Tool-pool assembly. Pure: no I/O.
