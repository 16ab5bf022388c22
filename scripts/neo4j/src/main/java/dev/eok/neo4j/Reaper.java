package dev.eok.neo4j;

import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.kernel.api.KernelTransactionHandle;
import org.neo4j.kernel.api.query.ExecutingQuery;
import org.neo4j.kernel.impl.api.KernelTransactions;
import org.neo4j.kernel.internal.GraphDatabaseAPI;

/**
 * Ends analysts' queries that Neo4j has terminated but that keep computing.
 *
 * <p>Neo4j checks a transaction's termination only between rows: one expression (a reduce over a
 * range of 10^18, a list comprehension nested in another, a regular expression that backtracks) runs to
 * its end after its timeout, holding a CPU for minutes or for ever. Every second this thread looks for
 * transactions that carry the service's `eok_query` metadata (the analysts' read-only, ad-hoc Cypher;
 * never EoK's own work), were marked for termination at least the grace period ago and still run a
 * query, and stops the thread computing it (Thread.stop: the expression unwinds with ThreadDeath and the
 * transaction, already terminated, is rolled back when its connection closes). Only read transactions
 * of analysts are touched: nothing they hold is written state.
 */
final class Reaper implements Runnable {
    static final String MARK = "eok_query";

    private final KernelTransactions transactions;
    private final long graceNanos;
    private final Map<Long, Long> terminatedSince = new HashMap<>();

    Reaper(GraphDatabaseService db, long graceMillis) {
        this.transactions =
                ((GraphDatabaseAPI) db).getDependencyResolver().resolveDependency(KernelTransactions.class);
        this.graceNanos = TimeUnit.MILLISECONDS.toNanos(graceMillis);
    }

    static void start(GraphDatabaseService db, long graceMillis) {
        Thread t = new Thread(new Reaper(db, graceMillis), "eok-neo4j-reaper");
        t.setDaemon(true);
        t.start();
    }

    @Override
    public void run() {
        while (true) {
            try {
                Thread.sleep(1000);
                sweep();
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                Launcher.log("reaper: " + e);
            }
        }
    }

    private void sweep() {
        long now = System.nanoTime();
        Set<Long> seen = new HashSet<>();
        for (KernelTransactionHandle tx : transactions.activeTransactions()) {
            if (!tx.getMetaData().containsKey(MARK) || tx.terminationMark().isEmpty()) {
                continue;
            }
            long id = tx.getTransactionSequenceNumber();
            seen.add(id);
            long since = terminatedSince.computeIfAbsent(id, k -> now);
            Optional<ExecutingQuery> query = tx.executingQuery();
            if (now - since >= graceNanos && query.isPresent()) {
                stop(query.get().threadExecutingTheQueryName(), tx.getMetaData().get(MARK));
            }
        }
        terminatedSince.keySet().retainAll(seen);
    }

    @SuppressWarnings("removal")
    private static void stop(String threadName, Object tag) {
        List<Thread> matches = Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.getName().equals(threadName))
                .toList();
        if (matches.size() != 1) {
            return; // never a thread we cannot name for certain
        }
        Launcher.log("reaper: stopping the terminated analyst query " + tag + " still running on " + threadName);
        matches.get(0).stop();
    }
}
