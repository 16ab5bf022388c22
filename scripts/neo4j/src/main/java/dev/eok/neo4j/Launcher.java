package dev.eok.neo4j;

import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;

/**
 * Runs an embedded Neo4j Community with only the Bolt connector, on 127.0.0.1, without auth (a
 * loopback-only development server). SIGTERM (or Ctrl-C) shuts the database down cleanly through a
 * shutdown hook, so committed transactions are checkpointed rather than replayed on the next start.
 *
 * <pre>
 * java -Xmx1g -jar eok-neo4j.jar --home DIR [--port 7687] [--pagecache 512m]
 *     [--tx-total-max 700m] [--tx-max 256m] [--tx-timeout 0s] [--set key=value ...] [--watch-pid PID]
 * </pre>
 *
 * With --watch-pid the server stops itself (cleanly) when that process ends, so a test session that
 * dies without stopping its server does not leave it running.
 *
 * Files under DIR: data/ (stores, transaction logs), logs/debug.log (Neo4j's own log),
 * eok-neo4j.conf (the settings of this run, rewritten at every start) and eok-neo4j.ready (present
 * while the server accepts Bolt connections; holds the pid and port).
 */
public final class Launcher {
    private static final String DATABASE = "neo4j";

    private Launcher() {}

    private static long watchPid = -1;

    public static void main(String[] args) throws Exception {
        Map<String, String> settings = new LinkedHashMap<>();
        Path home = parseArgs(args, settings);
        Files.createDirectories(home);
        Path conf = writeConf(home.resolve("eok-neo4j.conf"), settings);
        Path ready = home.resolve("eok-neo4j.ready");
        Files.deleteIfExists(ready); // a marker left by a killed run must not claim readiness

        log("starting Neo4j in " + home + " with " + settings);
        DatabaseManagementService dbms =
                new DatabaseManagementServiceBuilder(home).loadPropertiesFromFile(conf).build();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            log("shutdown requested");
            try {
                Files.deleteIfExists(ready);
            } catch (IOException e) {
                log("could not remove " + ready + ": " + e);
            }
            dbms.shutdown();
            log("stopped cleanly");
            stopped.countDown();
        }, "eok-neo4j-shutdown"));

        if (watchPid > 0) {
            watch(watchPid);
        }
        GraphDatabaseService db = dbms.database(DATABASE);
        if (!db.isAvailable(TimeUnit.MINUTES.toMillis(10))) {
            log("database " + DATABASE + " did not become available");
            System.exit(1);
        }
        long pid = ProcessHandle.current().pid();
        String port = settings.get("server.bolt.listen_address").replaceAll(".*:", "");
        Files.writeString(ready, "pid=" + pid + "\nport=" + port + "\nsince=" + Instant.now() + "\n");
        log("ready: bolt://127.0.0.1:" + port + " pid " + pid);
        stopped.await(); // the JVM exits when the shutdown hook has finished
    }

    /** Fills settings with Neo4j setting names and values; returns the home directory. */
    private static Path parseArgs(String[] args, Map<String, String> settings) {
        Path home = null;
        int port = 7687;
        // Only Bolt, only loopback, no auth: this server is for one developer's machine or a CI run.
        settings.put("server.http.enabled", "false");
        settings.put("server.https.enabled", "false");
        settings.put("server.bolt.enabled", "true");
        settings.put("dbms.security.auth_enabled", "false");
        // No usage reports: the server must never reach outside this machine.
        settings.put("dbms.usage_report.enabled", "false");
        settings.put("server.memory.pagecache.size", "512m");
        // Disk: Neo4j preallocates 256 MB per transaction log and database (~0.5 GB for an empty server)
        // and keeps logs for 2 days. A dev or test server wants neither; recovery after a crash only
        // needs the logs since the last checkpoint, which pruning never removes.
        settings.put("db.tx_log.preallocate", "false");
        settings.put("db.tx_log.rotation.retention_policy", "1G size");
        // Netty's default quiet period adds ~10 s to every stop; the databases are already checkpointed
        // and closed by the time the Bolt server shuts down, so nothing is lost by skipping it.
        settings.put("internal.dbms.bolt.netty_server_shutdown_quiet_period", "0");
        for (int i = 0; i < args.length; i++) {
            String flag = args[i];
            String value = i + 1 < args.length ? args[++i] : usage("missing value after " + flag);
            switch (flag) {
                case "--home" -> home = Path.of(value).toAbsolutePath();
                case "--port" -> port = parsePort(value);
                case "--pagecache" -> settings.put("server.memory.pagecache.size", value);
                case "--tx-total-max" -> settings.put("dbms.memory.transaction.total.max", value);
                case "--tx-max" -> settings.put("db.memory.transaction.max", value);
                case "--tx-timeout" -> settings.put("db.transaction.timeout", value);
                case "--watch-pid" -> watchPid = parsePid(value);
                case "--set" -> {
                    int eq = value.indexOf('=');
                    if (eq <= 0) {
                        usage("--set wants key=value, got " + value);
                    }
                    settings.put(value.substring(0, eq).trim(), value.substring(eq + 1).trim());
                }
                default -> usage("unknown option " + flag);
            }
        }
        if (home == null) {
            usage("--home DIR is required");
        }
        settings.put("server.bolt.listen_address", "127.0.0.1:" + port);
        settings.put("server.bolt.advertised_address", "127.0.0.1:" + port);
        return home;
    }

    private static int parsePort(String value) {
        try {
            int port = Integer.parseInt(value);
            if (port > 0 && port < 65536) {
                return port;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        return usage("--port wants a number in 1..65535, got " + value);
    }

    private static long parsePid(String value) {
        try {
            return Long.parseLong(value);
        } catch (NumberFormatException e) {
            return usage("--watch-pid wants a process id, got " + value);
        }
    }

    /** Exits (running the shutdown hook) once the watched process is gone. */
    private static void watch(long pid) {
        Runnable exit = () -> {
            log("watched process " + pid + " ended");
            System.exit(0);
        };
        ProcessHandle.of(pid).ifPresentOrElse(h -> h.onExit().thenRun(exit), exit);
    }

    private static Path writeConf(Path conf, Map<String, String> settings) throws IOException {
        try (Writer w = Files.newBufferedWriter(conf, StandardCharsets.UTF_8)) {
            w.write("# Written by the EoK launcher at every start; edits here are overwritten.\n");
            for (Map.Entry<String, String> e : settings.entrySet()) {
                w.write(e.getKey() + "=" + e.getValue() + "\n");
            }
        }
        return conf;
    }

    private static <T> T usage(String problem) {
        System.err.println("eok-neo4j: " + problem);
        System.err.println("usage: java -jar eok-neo4j.jar --home DIR [--port N] [--pagecache SIZE]"
                + " [--tx-total-max SIZE] [--tx-max SIZE] [--tx-timeout DURATION] [--set key=value]..."
                + " [--watch-pid PID]");
        System.exit(2);
        return null;
    }

    private static void log(String message) {
        System.out.println(Instant.now() + " eok-neo4j: " + message);
        System.out.flush();
    }
}
