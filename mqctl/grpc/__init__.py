"""The gRPC transport (mqctl.v1.Controller and Broker services), beside mqctl/remoting (RocketMQ's
protocol): each translates its wire into the core's requests and back, and decides nothing."""
