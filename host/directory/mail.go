package directory

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/sdk/contract"
)

// mailTimeout bounds one mail, from the connection to the server's answer to DATA.
const mailTimeout = 30 * time.Second

// LinkMail is a one-time link to mail to its user.
type LinkMail struct {
	// To is the user's address, checked when the user was added.
	To string
	// URL is the link, token included.
	URL string
	// Purpose is store.LinkInvitation or store.LinkReset.
	Purpose string
	Expires time.Time
}

// SendLink mails a link, in plain text naming the deployment's domain (that of the
// account's From address) and the link's expiry, through a deployment's mail account
// (an smtp result) with its password: implicit TLS, STARTTLS or, as the account says,
// neither (which net/smtp's AUTH PLAIN allows on loopback only). An error says at which
// step the server refused and its reply code; it never holds the link or the password.
func SendLink(ctx context.Context, account contract.SMTPResult, password []byte, m LinkMail) error {
	from, err := mail.ParseAddress(account.From)
	if err != nil || from.Address != account.From {
		return errors.New("the deployment's mail account has no usable From address: submit the deployment again")
	}
	_, domain, _ := strings.Cut(from.Address, "@")
	msg, err := linkMessage(from.Address, domain, m)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(account.Host, strconv.Itoa(account.Port))
	ctx, cancel := context.WithTimeout(ctx, mailTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("connecting to the mail server %s: %w", addr, err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	tlsConfig := &tls.Config{ServerName: account.Host, MinVersion: tls.VersionTLS12}
	switch account.TLS {
	case "tls":
		tc := tls.Client(conn, tlsConfig)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("TLS with the mail server %s: %w", addr, err)
		}
		conn = tc
	case "starttls", "none":
	default:
		return fmt.Errorf("the deployment's mail account says tls %q, which is none of none, starttls or tls: submit the deployment again", account.TLS)
	}
	c, err := smtp.NewClient(conn, account.Host)
	if err != nil {
		return mailStep("greeting", err)
	}
	defer c.Close()
	if account.TLS == "starttls" {
		if err := c.StartTLS(tlsConfig); err != nil {
			return mailStep("STARTTLS", err)
		}
	}
	if account.User != "" {
		if err := c.Auth(smtp.PlainAuth("", account.User, string(password), account.Host)); err != nil {
			return mailStep("AUTH (the deployment's mail account)", err)
		}
	}
	if err := c.Mail(from.Address); err != nil {
		return mailStep("MAIL FROM", err)
	}
	if err := c.Rcpt(m.To); err != nil {
		return mailStep("RCPT TO (the user's address)", err)
	}
	w, err := c.Data()
	if err != nil {
		return mailStep("DATA", err)
	}
	if _, err := w.Write(msg); err != nil {
		return mailStep("DATA", err)
	}
	if err := w.Close(); err != nil {
		return mailStep("the message", err)
	}
	return c.Quit()
}

// mailStep names the step a mail failed at: for a server's refusal only its reply code,
// since a reply may repeat what was sent.
func mailStep(step string, err error) error {
	var tp *textproto.Error
	if errors.As(err, &tp) {
		return fmt.Errorf("the mail server refused %s with code %d: see the smtp provider's log", step, tp.Code)
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("the mail server's connection failed at %s: %w", step, err)
	}
	var cert *tls.CertificateVerificationError
	if errors.As(err, &cert) {
		return fmt.Errorf("the mail server's TLS certificate was not accepted at %s (%v): give the smtp provider a certificate the system's roots trust, for its host name", step, cert.Err)
	}
	if strings.Contains(err.Error(), "unencrypted connection") {
		return fmt.Errorf("the mail account's password would go unencrypted at %s: give the smtp provider TLS (starttls or tls)", step)
	}
	return fmt.Errorf("mailing at %s failed: the server's answer was not understood", step)
}

// linkMessage is the mail of a link: 7-bit headers, a quoted-printable plain text body.
func linkMessage(from, domain string, m LinkMail) ([]byte, error) {
	to, err := mail.ParseAddress(m.To)
	if err != nil || to.Address != m.To {
		return nil, errors.New("the user's e-mail address is not one: change it, then reset the password")
	}
	subject, intro := "Your account at "+domain, "An account was made for you at "+domain+"."
	if m.Purpose == store.LinkReset {
		subject, intro = "Choose a new password at "+domain, "Your password at "+domain+" was reset."
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for _, h := range [][2]string{
		{"From", (&mail.Address{Address: from}).String()},
		{"To", (&mail.Address{Address: to.Address}).String()},
		{"Subject", subject},
		{"Date", time.Now().Format(time.RFC1123Z)},
		{"Message-ID", "<" + hex.EncodeToString(id) + "@" + domain + ">"},
		{"Auto-Submitted", "auto-generated"},
		{"MIME-Version", "1.0"},
		{"Content-Type", "text/plain; charset=utf-8"},
		{"Content-Transfer-Encoding", "quoted-printable"},
	} {
		b.WriteString(h[0] + ": " + h[1] + "\r\n")
	}
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	fmt.Fprintf(qp, "%s\r\n\r\nOpen this link to choose your password:\r\n\r\n%s\r\n\r\nIt works once, until %s. If you did not expect this mail, ignore it.\r\n",
		intro, m.URL, m.Expires.UTC().Format("Monday 2 January 2006, 15:04 MST"))
	if err := qp.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// MailAccount returns a deployment's mail account and its password, a nil account when
// it has none (deploy.Engine.Mail).
type MailAccount func(ctx context.Context, deploymentID string) (*contract.SMTPResult, []byte, error)

// MailLink mails m through the deployment's account and reports whether it did: not
// when the user has no address or the deployment no account.
func MailLink(ctx context.Context, account MailAccount, deploymentID string, m LinkMail) (bool, error) {
	if m.To == "" {
		return false, nil
	}
	acct, password, err := account(ctx, deploymentID)
	if err != nil {
		return false, fmt.Errorf("the deployment's mail account: %w", err)
	}
	if acct == nil {
		return false, nil
	}
	if err := SendLink(ctx, *acct, password, m); err != nil {
		return false, err
	}
	return true, nil
}
