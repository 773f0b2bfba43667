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
 */
public final class KdrRegexCheck {
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
                for (String probe : probes) {
                    bits.append(pattern.matcher(probe).matches() ? '1' : '0');
                }
                out.append(bits).append('\n');
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
