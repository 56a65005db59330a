/*
 * RocketMQ's own TLS and ACL code against mqctl (tests/interop/test_remoting_tls_acl_interop.py).
 * Compiled against ../shared/rocketmq-broker/lib (RocketMQ 5.3.3, which has the acl and auth modules;
 * rocketmq-java/lib has neither). TLS is configured as RocketMQ configures it: the tls.* system
 * properties (TlsSystemConfig), read by NettyRemotingClient/NettyRemotingServer through TlsHelper.
 *
 *   sign                  stdin: a JSON array of {accessKey, secretKey, securityToken?, code, ext, body
 *                         (Base64)}; stdout: a JSON array of the ext fields after RocketMQ's
 *                         AclClientRPCHook.doBeforeRequest (AccessKey, SecurityToken, Signature added).
 *   client ADDR CODE [AK SK]
 *                         NettyRemotingClient (tls.enable as the system property says), one request
 *                         CODE to ADDR, signed by AclClientRPCHook when AK/SK are given; stdout: one
 *                         JSON line {code, remark, ext} or {error}.
 *   server PORT AK:SK...  NettyRemotingServer on 127.0.0.1:PORT (tls.server.mode as the system property
 *                         says) that authenticates every request with RocketMQ's ACL 2.0 code
 *                         (DefaultAuthenticationContextBuilder builds the context from the request as
 *                         received, DefaultAuthenticationHandler checks the signature against the user's
 *                         password); answers 0 with ext {user} (1010: a properties body aclUser=...) or
 *                         16 NO_PERMISSION with the exception's message; one JSON line per request on
 *                         stdout; stops at the end of stdin.
 */

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import io.netty.channel.ChannelHandlerContext;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.auth.authentication.builder.DefaultAuthenticationContextBuilder;
import org.apache.rocketmq.auth.authentication.chain.DefaultAuthenticationHandler;
import org.apache.rocketmq.auth.authentication.context.DefaultAuthenticationContext;
import org.apache.rocketmq.auth.authentication.model.User;
import org.apache.rocketmq.auth.config.AuthConfig;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.netty.NettyRemotingServer;
import org.apache.rocketmq.remoting.netty.NettyRequestProcessor;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.ResponseCode;

public class TlsAclDriver {
    static synchronized void emit(Object doc) {
        System.out.println(JSON.toJSONString(doc));
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "sign":
                sign();
                break;
            case "client":
                client(args);
                break;
            case "server":
                server(args);
                break;
            default:
                throw new IllegalArgumentException(args[0]);
        }
    }

    static void sign() throws Exception {
        String input = new String(System.in.readAllBytes(), StandardCharsets.UTF_8);
        JSONArray out = new JSONArray();
        for (Object o : JSON.parseArray(input)) {
            JSONObject c = (JSONObject) o;
            RemotingCommand request = RemotingCommand.createRequestCommand(c.getIntValue("code"), null);
            JSONObject ext = c.getJSONObject("ext");
            for (String key : ext.keySet()) {
                request.addExtField(key, ext.getString(key));
            }
            String body = c.getString("body");
            if (body != null && !body.isEmpty()) {
                request.setBody(Base64.getDecoder().decode(body));
            }
            SessionCredentials credentials = new SessionCredentials(c.getString("accessKey"), c.getString("secretKey"));
            if (c.getString("securityToken") != null) {
                credentials.setSecurityToken(c.getString("securityToken"));
            }
            new AclClientRPCHook(credentials).doBeforeRequest("127.0.0.1:1", request);
            out.add(request.getExtFields());
        }
        emit(out);
    }

    static void client(String[] args) throws Exception {
        NettyClientConfig config = new NettyClientConfig();  // useTLS = tls.enable
        NettyRemotingClient client = new NettyRemotingClient(config);
        if (args.length > 4) {
            client.registerRPCHook(new AclClientRPCHook(new SessionCredentials(args[3], args[4])));
        }
        client.start();
        try {
            RemotingCommand request = RemotingCommand.createRequestCommand(Integer.parseInt(args[2]), null);
            RemotingCommand response = client.invokeSync(args[1], request, 20000);
            Map<String, Object> doc = new LinkedHashMap<>();
            doc.put("tls", config.isUseTLS());
            doc.put("code", response.getCode());
            doc.put("remark", response.getRemark());
            doc.put("ext", response.getExtFields());
            emit(doc);
        } catch (Exception e) {
            Map<String, Object> doc = new LinkedHashMap<>();
            doc.put("tls", config.isUseTLS());
            doc.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
            emit(doc);
        } finally {
            client.shutdown();
        }
    }

    /** DefaultAuthenticationHandler with its users here instead of RocketMQ's metadata store. */
    static class Authenticator extends DefaultAuthenticationHandler {
        final Map<String, String> users;

        Authenticator(Map<String, String> users) {
            super(new AuthConfig(), null);
            this.users = users;
        }

        @Override
        protected CompletableFuture<User> getUser(DefaultAuthenticationContext context) {
            String password = users.get(context.getUsername());
            return CompletableFuture.completedFuture(password == null ? null : User.of(context.getUsername(), password));
        }
    }

    static void server(String[] args) throws Exception {
        Map<String, String> users = new HashMap<>();
        for (int i = 2; i < args.length; i++) {
            String[] kv = args[i].split(":", 2);
            users.put(kv[0], kv[1]);
        }
        Authenticator authenticator = new Authenticator(users);
        DefaultAuthenticationContextBuilder builder = new DefaultAuthenticationContextBuilder();
        NettyServerConfig config = new NettyServerConfig();
        config.setBindAddress("127.0.0.1");
        config.setListenPort(Integer.parseInt(args[1]));
        config.setServerWorkerThreads(2);
        config.setServerSelectorThreads(1);
        config.setServerCallbackExecutorThreads(1);
        NettyRemotingServer server = new NettyRemotingServer(config);
        ExecutorService executor = Executors.newFixedThreadPool(2);
        server.registerDefaultProcessor(new NettyRequestProcessor() {
            @Override
            public RemotingCommand processRequest(ChannelHandlerContext ctx, RemotingCommand request) {
                Map<String, Object> event = new LinkedHashMap<>();
                event.put("event", "request");
                event.put("code", request.getCode());
                event.put("ext", request.getExtFields());
                RemotingCommand response;
                try {
                    DefaultAuthenticationContext context = builder.build(ctx, request);
                    authenticator.handle(context, null).join();
                    event.put("user", context.getUsername());
                    response = RemotingCommand.createResponseCommand(ResponseCode.SUCCESS, null);
                    response.addExtField("user", context.getUsername());
                    if (request.getCode() == 1010) {  // GET_CONTROLLER_CONFIG: a properties body
                        response.setBody(("aclUser=" + context.getUsername() + "\n").getBytes(StandardCharsets.UTF_8));
                    }
                } catch (Exception e) {
                    Throwable cause = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
                    event.put("refused", cause.getMessage());
                    response = RemotingCommand.createResponseCommand(ResponseCode.NO_PERMISSION, cause.getMessage());
                }
                emit(event);
                return response;
            }

            @Override
            public boolean rejectRequest() {
                return false;
            }
        }, executor);
        server.start();
        Map<String, Object> ready = new LinkedHashMap<>();
        ready.put("event", "ready");
        ready.put("port", server.localListenPort());
        emit(ready);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (in.readLine() != null) {
            // until the end of stdin
        }
        server.shutdown();
        executor.shutdownNow();
    }
}
