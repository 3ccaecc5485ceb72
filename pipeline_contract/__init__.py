"""The switch pipeline contract in code, shared by the controller and both switches: P4Info
loading and name/id lookups (`p4info`), table entries by P4Info name (`entries`), and whether
two p4c builds of the pipeline are the same program across p4c versions (`compiled`).

Neither the controller nor a switch model owns it, so a switch never imports the controller.
(Not called `p4rt`: the repository packages nothing whose name starts with `p4`, a name the
`p4runtime` wheel owns.)"""
