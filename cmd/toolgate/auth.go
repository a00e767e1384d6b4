package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/oauthclient"
	"github.com/toolgate/toolgate/internal/upstreamoauth"
)

// loginTimeout bounds `toolgate auth login`: the person has this long to
// authorize in the browser.
const loginTimeout = 10 * time.Minute

const authUsage = `usage:
  toolgate auth login  [flags] UPSTREAM   authorize an upstream with OAuth and store its tokens
  toolgate auth status [flags]            list each OAuth upstream's state (never a token)
  toolgate auth logout [flags] UPSTREAM   revoke (RFC 7009, where offered) and forget its tokens
`

// cmdAuth runs `toolgate auth SUBCOMMAND`.
func cmdAuth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, authUsage)
		return cli.ExitError{Code: 2}
	}
	switch args[0] {
	case "login":
		return cmdAuthLogin(ctx, args[1:], stdout, stderr)
	case "status":
		return cmdAuthStatus(args[1:], stdout, stderr)
	case "logout":
		return cmdAuthLogout(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, authUsage)
	return cli.ExitError{Code: 2, Msg: fmt.Sprintf("unknown auth command %q", args[0])}
}

// authClient loads the configuration and returns the OAuth client of the
// upstream the one argument names, with browser (nil for none).
func authClient(c *cli.Common, args []string, browser oauthclient.Browser, stderr io.Writer) (*oauthclient.Client, error) {
	if len(args) != 1 {
		return nil, cli.ExitError{Code: 2, Msg: "name one upstream, like: toolgate auth login linear"}
	}
	cfg, logger, err := cli.Load(c, stderr)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(cfg.Upstreams, func(u config.Upstream) bool { return u.Name == args[0] })
	if i < 0 || cfg.Upstreams[i].OAuth == nil {
		return nil, cli.ExitError{Code: 1, Msg: fmt.Sprintf("%s has no upstream %q with an oauth section; the OAuth upstreams are: %s", cfg.Source, args[0], oauthNames(cfg))}
	}
	store, err := upstreamoauth.OpenStore(cfg)
	if err != nil {
		return nil, cli.ExitError{Code: 1, Msg: err.Error()}
	}
	oc, err := upstreamoauth.Settings(cfg, i, store, browser)
	if err != nil {
		return nil, cli.ExitError{Code: 1, Msg: err.Error()}
	}
	oc.Upstream, oc.ServerURL, oc.Base, oc.Logger = args[0], cfg.Upstreams[i].URL, http.DefaultTransport, logger
	return oauthclient.New(*oc), nil
}

// parseAround parses args whose flags may come before or after the
// upstream's name (`toolgate auth login fx --config f`, as the messages
// print it) and returns the names.
func parseAround(fs *flag.FlagSet, args []string) ([]string, error) {
	var names []string
	for {
		if err := cli.Parse(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return names, nil
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func oauthNames(cfg *config.Config) string {
	var names []string
	for _, u := range cfg.Upstreams {
		if u.OAuth != nil {
			names = append(names, u.Name)
		}
	}
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

func cmdAuthLogin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := cli.NewFlags("auth login", stderr)
	noBrowser := fs.Bool("no-browser", false, "print the authorization URL instead of opening a browser (a headless machine)")
	principal := fs.String("principal", "", "authorize for this toolgate `principal` (an upstream with per_principal); without it, the gateway's own token, which such an upstream uses only to list its tools")
	names, err := parseAround(fs, args)
	if err != nil {
		return err
	}
	oc, err := authClient(c, names, newBrowser(stderr, *noBrowser), stderr)
	if err != nil {
		return err
	}
	if err := checkPrincipalFlag(oc, *principal); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, loginTimeout)
	defer cancel()
	if err := oc.Login(ctx, *principal, ""); err != nil {
		return cli.ExitError{Code: 1, Msg: err.Error()}
	}
	if *principal != "" {
		fmt.Fprintf(stdout, "upstream %s authorized for principal %s; its tokens are stored encrypted\n", oc.Upstream(), *principal)
		return nil
	}
	fmt.Fprintf(stdout, "upstream %s authorized; its tokens are stored encrypted\n", oc.Upstream())
	return nil
}

// checkPrincipalFlag refuses --principal for an upstream that keeps one
// token for the gateway.
func checkPrincipalFlag(oc *oauthclient.Client, principal string) error {
	if principal != "" && !oc.PerPrincipal() {
		return cli.ExitError{Code: 2, Msg: fmt.Sprintf("upstream %s keeps one token for the gateway; --principal applies to upstreams with oauth.per_principal", oc.Upstream())}
	}
	return nil
}

func cmdAuthLogout(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := cli.NewFlags("auth logout", stderr)
	principal := fs.String("principal", "", "forget the tokens of this toolgate `principal` only (an upstream with per_principal)")
	names, err := parseAround(fs, args)
	if err != nil {
		return err
	}
	oc, err := authClient(c, names, nil, stderr)
	if err != nil {
		return err
	}
	if err := checkPrincipalFlag(oc, *principal); err != nil {
		return err
	}
	revoked, err := oc.Logout(ctx, *principal)
	switch {
	case err != nil:
		return cli.ExitError{Code: 1, Msg: fmt.Sprintf("the tokens of upstream %s are forgotten, but: %v", oc.Upstream(), err)}
	case revoked:
		fmt.Fprintf(stdout, "upstream %s: tokens revoked and forgotten\n", oc.Upstream())
	default:
		fmt.Fprintf(stdout, "upstream %s: tokens forgotten (its authorization server offers no revocation)\n", oc.Upstream())
	}
	return nil
}

func cmdAuthStatus(args []string, stdout, stderr io.Writer) error {
	fs, c := cli.NewFlags("auth status", stderr)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	cfg, _, err := cli.Load(c, stderr)
	if err != nil {
		return err
	}
	store, err := upstreamoauth.OpenStore(cfg)
	if err != nil {
		return cli.ExitError{Code: 1, Msg: err.Error()}
	}
	recs, err := store.List()
	if err != nil {
		return cli.ExitError{Code: 1, Msg: err.Error()}
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "UPSTREAM\tPRINCIPAL\tSTATE\tEXPIRES IN\tSCOPES")
	now := time.Now()
	for _, u := range cfg.Upstreams {
		if u.OAuth == nil {
			continue
		}
		found := false
		for _, r := range recs {
			if r.Upstream != u.Name || r.Server != u.URL {
				continue
			}
			found = true
			st := oauthclient.StatusOf(r, now)
			state, expires := "needs_auth", "-"
			if st.Authorized {
				state = "authorized"
				if st.ExpiresIn != 0 {
					expires = st.ExpiresIn.String()
				}
				if st.ExpiresIn < 0 && st.Refreshable {
					state = "authorized (refreshes on next use)"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", u.Name, orDash(st.Principal), state, expires, orDash(strings.Join(st.Scopes, " ")))
		}
		if !found {
			fmt.Fprintf(tw, "%s\t-\tneeds_auth\t-\t-\n", u.Name)
		}
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// browser shows authorization URLs: it prints the URL on stderr and,
// unless headless, opens it with $BROWSER (the first command of the
// colon-separated list; %s is replaced by the URL, else the URL is its
// last argument), else xdg-open or open.
type browser struct {
	stderr   io.Writer
	headless bool
}

func newBrowser(stderr io.Writer, headless bool) oauthclient.Browser {
	return &browser{stderr: stderr, headless: headless}
}

func (b *browser) Open(ctx context.Context, authURL string) error {
	fmt.Fprintf(b.stderr, "toolgate: to authorize, open this URL in a browser on this machine:\n  %s\n", authURL)
	if b.headless {
		return nil
	}
	name, args := browserCommand(os.Getenv("BROWSER"), authURL)
	if name == "" {
		return nil // printed: the person opens it
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(b.stderr, "toolgate: could not start %s (%v); open the URL above yourself\n", name, err)
		return nil
	}
	go func() { _ = cmd.Wait() }() // reaped whenever the browser exits
	return nil
}

// browserCommand is the command that opens u: from env ($BROWSER), else
// the platform's opener; "" when there is none.
func browserCommand(env, u string) (string, []string) {
	if first, _, _ := strings.Cut(env, ":"); strings.TrimSpace(first) != "" {
		f := strings.Fields(first)
		replaced := false
		for i, a := range f[1:] {
			if strings.Contains(a, "%s") {
				f[i+1], replaced = strings.ReplaceAll(a, "%s", u), true
			}
		}
		if !replaced {
			f = append(f, u)
		}
		return f[0], f[1:]
	}
	opener := "xdg-open"
	if runtime.GOOS == "darwin" {
		opener = "open"
	}
	if _, err := exec.LookPath(opener); err != nil {
		return "", nil
	}
	if runtime.GOOS != "darwin" && os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return "", nil
	}
	return opener, []string{u}
}
