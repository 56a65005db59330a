/*
 * What RocketMQ's controller answers to GET_CONTROLLER_CONFIG (1010), built from RocketMQ's own classes
 * (compiled unchanged in ../shared/rocketmq-java/lib), for tests/interop/test_controller_config_interop.py.
 *
 * RocketMQ: ControllerManager builds `new Configuration(log, controllerConfig, nettyServerConfig)`
 * (controller/src/main/java/org/apache/rocketmq/controller/ControllerManager.java), ControllerStartup
 * registers the properties of its -c file on it, and ControllerRequestProcessor.handleGetControllerConfig
 * answers `MixAll.adjustConfigForPlatform(configuration.getAllConfigsFormatString())`.
 *
 * org.apache.rocketmq.remoting.Configuration is not among the shared classes, so configFormatString
 * below repeats its steps (remoting/src/main/java/org/apache/rocketmq/remoting/Configuration.java):
 * registerConfig(Object) merges MixAll.object2Properties(object) into allConfigs, registerConfig(Properties)
 * merges the properties, getAllConfigsInternal merges object2Properties of every object again and
 * returns MixAll.properties2String(allConfigs, true). MixAll, ControllerConfig, JraftConfig and
 * NettyServerConfig are RocketMQ's.
 *
 * Usage:
 *   ControllerConfigDriver             `new Configuration(log, new ControllerConfig(), new NettyServerConfig())`
 *   ControllerConfigDriver deployment  a DLedger controller as ControllerStartup.createControllerManager
 *                                      sets it up from a -c file (rocketmqHome, controllerDLegerGroup,
 *                                      controllerDLegerPeers, controllerDLegerSelfId, controllerStorePath)
 * Prints the answer's body (key=value lines) on stdout.
 */

import java.util.Properties;
import org.apache.rocketmq.common.ControllerConfig;
import org.apache.rocketmq.common.JraftConfig;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;

public class ControllerConfigDriver {
    static String configFormatString(Properties registered, Object... configObjects) {
        Properties allConfigs = new Properties();
        for (Object configObject : configObjects) {  // new Configuration(log, configObjects...)
            allConfigs.putAll(MixAll.object2Properties(configObject));
        }
        if (registered != null) {  // registerConfig(properties)
            allConfigs.putAll(registered);
        }
        for (Object configObject : configObjects) {  // getAllConfigsInternal
            allConfigs.putAll(MixAll.object2Properties(configObject));
        }
        return MixAll.adjustConfigForPlatform(MixAll.properties2String(allConfigs, true));
    }

    public static void main(String[] args) {
        ControllerConfig controllerConfig = new ControllerConfig();
        NettyServerConfig nettyServerConfig = new NettyServerConfig();
        Properties properties = null;
        if (args.length > 0 && args[0].equals("deployment")) {
            // ControllerStartup.createControllerManager
            JraftConfig jraftConfig = new JraftConfig();
            controllerConfig.setJraftConfig(jraftConfig);
            nettyServerConfig.setListenPort(19876);
            properties = new Properties();  // the -c file of a DLedger controller
            properties.setProperty("rocketmqHome", "/opt/rocketmq");
            properties.setProperty("controllerDLegerGroup", "group1");
            properties.setProperty("controllerDLegerPeers", "n0-127.0.0.1:9877;n1-127.0.0.1:9878;n2-127.0.0.1:9879");
            properties.setProperty("controllerDLegerSelfId", "n0");
            properties.setProperty("controllerStorePath", "/tmp/rmqstore/controller");
            MixAll.properties2Object(properties, controllerConfig);
            MixAll.properties2Object(properties, jraftConfig);
            MixAll.properties2Object(properties, nettyServerConfig);
        }
        System.out.print(configFormatString(properties, controllerConfig, nettyServerConfig));
        System.out.flush();
    }
}
