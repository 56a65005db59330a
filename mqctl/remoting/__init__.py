"""RocketMQ remoting protocol: the wire format (codec), header names (headers), a front door for
`mqctl serve --remoting-port` (server) and a client (client). See docs/remoting.md.

Like the gRPC transport, everything here only translates: the controller core decides.
"""
