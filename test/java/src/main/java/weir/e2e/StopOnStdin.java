package weir.e2e;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicBoolean;

/** The stop signal of the test's client programs: a line {@code stop} on standard input, or its end. */
final class StopOnStdin {
    private StopOnStdin() {}

    /** watch starts a daemon thread reading standard input and returns the flag it sets on a stop. */
    static AtomicBoolean watch() {
        AtomicBoolean stop = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null && !line.equals("stop")) {
                    // Only "stop" means anything.
                }
            } catch (Exception e) {
                // A broken standard input stops the program as its end does.
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        return stop;
    }
}
