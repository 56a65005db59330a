/*
 * RocketMQ's own recovery walk over commitlog files, for bench/bench_pipeline.py (issue 32): what a broker
 * runs at start-up (CommitLog.recoverNormally): CommitLog.checkMessageAndReturnSize with checkCRCOnRecover
 * (true, RocketMQ's default) over each mapped file's slice, record after record, until the blank marker or
 * the end. Compiled by the bench against RocketMQ's classes (../shared/rocketmq-broker/lib). Usage:
 *
 *   java -cp OUT:LIB/* RocketmqWalk PASSES FILE_SIZE FILE...
 *
 * prints per pass "pass I records R bytes B wall_s W cpu_s C" (CPU: the whole JVM process's, its JIT and
 * collector threads included); the first pass is the JIT's warm-up.
 */
import java.io.File;
import java.io.RandomAccessFile;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.store.CommitLog;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.DispatchRequest;
import org.apache.rocketmq.store.config.MessageStoreConfig;

public class RocketmqWalk {
    public static void main(String[] args) throws Exception {
        int passes = Integer.parseInt(args[0]);
        int fileSize = Integer.parseInt(args[1]);
        File root = Files.createTempDirectory("rocketmq-walk").toFile();
        MessageStoreConfig config = new MessageStoreConfig();
        config.setStorePathRootDir(root.getPath());
        config.setStorePathCommitLog(new File(root, "commitlog").getPath());
        config.setMappedFileSizeCommitLog(fileSize);
        boolean checkCRC = config.isCheckCRCOnRecover();
        boolean checkDupInfo = config.isDuplicationEnable();
        DefaultMessageStore store = new DefaultMessageStore(config, null, null, new BrokerConfig(),
            new ConcurrentHashMap<>());
        CommitLog log = store.getCommitLog();
        com.sun.management.OperatingSystemMXBean os =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        MappedByteBuffer[] maps = new MappedByteBuffer[args.length - 2];
        for (int f = 2; f < args.length; f++) {
            try (RandomAccessFile raf = new RandomAccessFile(args[f], "r"); FileChannel ch = raf.getChannel()) {
                maps[f - 2] = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
            }
        }
        for (int pass = 0; pass < passes; pass++) {
            long records = 0, bytes = 0;
            long c0 = os.getProcessCpuTime(), t0 = System.nanoTime();
            for (MappedByteBuffer map : maps) {
                ByteBuffer byteBuffer = map.slice();         // as MappedFile.sliceByteBuffer()
                boolean ended = false;
                while (!ended) {
                    DispatchRequest r = log.checkMessageAndReturnSize(byteBuffer, checkCRC, checkDupInfo);
                    int size = r.getMsgSize();
                    if (r.isSuccess() && size > 0) {
                        records++;
                        bytes += size;
                    } else {
                        ended = true;                        // the blank marker / zero bytes, or damage
                        if (!r.isSuccess()) {
                            System.out.println("stopped at damage after " + records + " records");
                        }
                    }
                }
            }
            double wall = (System.nanoTime() - t0) / 1e9, cpu = (os.getProcessCpuTime() - c0) / 1e9;
            System.out.println("pass " + pass + " records " + records + " bytes " + bytes + " wall_s " + wall
                + " cpu_s " + cpu);
        }
        System.exit(0);
    }
}
