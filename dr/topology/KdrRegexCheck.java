import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * Compiles regular expressions with java.util.regex, the engine MirrorMaker 2 and Kafka Connect use,
 * and matches each against probe strings with Matcher.matches() (what MirrorMaker 2's topic and group
 * filters call). Used by dr.topology.java_regex; every string travels Base64-encoded (UTF-8).
 *
 * stdin:  "probe <b64>" lines, then "pattern <b64>" lines.
 * stdout: one line per pattern, in order: "ok <0|1 per probe>" or "error <b64 description>".
 *
 * A pattern whose matching outlasts a deadline (catastrophic backtracking the static check in
 * dr.base.pattern_safety did not foresee) is answered with an error, not waited for: the probe is
 * read through a CharSequence that checks the clock, as java.util.regex reads every character.
 */
public final class KdrRegexCheck {
    private static final long DEADLINE_NANOS = 2_000_000_000L;

    private static final class TooSlow extends RuntimeException {
        TooSlow() {
            super(null, null, false, false);
        }
    }

    private static final class Timed implements CharSequence {
        private final String text;
        private final long deadline;
        private int reads;

        Timed(String text, long deadline) {
            this.text = text;
            this.deadline = deadline;
        }

        @Override
        public char charAt(int index) {
            if ((++reads & 0xFFF) == 0 && System.nanoTime() > deadline) {
                throw new TooSlow();
            }
            return text.charAt(index);
        }

        @Override
        public int length() {
            return text.length();
        }

        @Override
        public CharSequence subSequence(int start, int end) {
            return text.subSequence(start, end);
        }

        @Override
        public String toString() {
            return text;
        }
    }

    private static String decode(String text) {
        return new String(Base64.getDecoder().decode(text), StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<String> probes = new ArrayList<>();
        StringBuilder out = new StringBuilder();
        Base64.Encoder encoder = Base64.getEncoder();
        String line;
        while ((line = in.readLine()) != null) {
            int space = line.indexOf(' ');
            if (space < 0) {
                continue;
            }
            String kind = line.substring(0, space);
            String value = decode(line.substring(space + 1));
            if (kind.equals("probe")) {
                probes.add(value);
                continue;
            }
            try {
                Pattern pattern = Pattern.compile(value);
                StringBuilder bits = new StringBuilder("ok ");
                long deadline = System.nanoTime() + DEADLINE_NANOS;
                for (String probe : probes) {
                    bits.append(pattern.matcher(new Timed(probe, deadline)).matches() ? '1' : '0');
                }
                out.append(bits).append('\n');
            } catch (TooSlow e) {
                String why = "matching took over " + DEADLINE_NANOS / 1_000_000_000L
                    + " s (catastrophic backtracking)";
                out.append("error ").append(encoder.encodeToString(why.getBytes(StandardCharsets.UTF_8))).append('\n');
            } catch (PatternSyntaxException e) {
                String why = e.getDescription() + (e.getIndex() >= 0 ? " near index " + e.getIndex() : "");
                out.append("error ").append(encoder.encodeToString(why.getBytes(StandardCharsets.UTF_8))).append('\n');
            } catch (StackOverflowError e) {
                out.append("error ").append(encoder.encodeToString(
                    "nested too deeply to compile".getBytes(StandardCharsets.UTF_8))).append('\n');
            }
        }
        System.out.print(out);
        System.out.flush();
    }
}
