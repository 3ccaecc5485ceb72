"""The pure-Python reference switch: the MRC pipeline of docs/design.md, its P4Runtime server, and the
conformance suite that checks it against BMv2 (see refswitch/README.md)."""
