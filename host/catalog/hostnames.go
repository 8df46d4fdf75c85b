package catalog

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/fedhost/fedhost/sdk/schema"
)

// HostNameAnnotation marks the string option of an app's schema that holds the app's host
// name under the deployment's domain.
const HostNameAnnotation = "x-hostname"

// MaxHostName is the longest full host name, the app's name and the domain together.
const MaxHostName = 253

// relativeName is a host name under a domain: dot-separated labels of 1 to 63 lower case
// letters, digits and inner hyphens.
var relativeName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)

// hostNameOption is where an app's schema keeps its host name: the JSON pointer within
// its options and the option's title.
type hostNameOption struct {
	pointer, title string
}

// propertySchema is the part of a schema hostNameOptionOf walks.
type propertySchema struct {
	Type       any                        `json:"type"`
	Title      string                     `json:"title"`
	HostName   any                        `json:"x-hostname"`
	Properties map[string]*propertySchema `json:"properties"`
}

// hostNameOptionOf finds the option of an app's schema marked x-hostname, through nested
// objects' properties; ok is false when there is none. It refuses a mark on anything but
// a string, and more than one.
func hostNameOptionOf(raw json.RawMessage) (opt hostNameOption, ok bool, err error) {
	var top propertySchema
	if err := json.Unmarshal(raw, &top); err != nil {
		return hostNameOption{}, false, fmt.Errorf("reading its %s option: %w", HostNameAnnotation, err)
	}
	var found []hostNameOption
	var walk func(s *propertySchema, pointer string) error
	walk = func(s *propertySchema, pointer string) error {
		names := make([]string, 0, len(s.Properties))
		for name := range s.Properties {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			p := s.Properties[name]
			if p == nil {
				continue
			}
			at := pointer + "/" + strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
			switch p.HostName {
			case nil, false:
			case true:
				if p.Type != "string" {
					return fmt.Errorf("option %s is marked %s but is not of type string: mark the string option that holds the app's host name", at, HostNameAnnotation)
				}
				title := p.Title
				if title == "" {
					title = "Host name"
				}
				found = append(found, hostNameOption{pointer: at, title: title})
			default:
				return fmt.Errorf("option %s: %s must be true or false", at, HostNameAnnotation)
			}
			if err := walk(p, at); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(&top, ""); err != nil {
		return hostNameOption{}, false, err
	}
	switch len(found) {
	case 0:
		return hostNameOption{}, false, nil
	case 1:
		return found[0], true, nil
	default:
		return hostNameOption{}, false, fmt.Errorf("options %s and %s are both marked %s: an app has one host name, mark one", found[0].pointer, found[1].pointer, HostNameAnnotation)
	}
}

// HostNames returns the full host name of every enabled app whose schema marks a host name
// option, by app, for a configuration with its defaults filled in. It lists a problem at
// the option's pointer for a value that is not a name under the domain, one too long with
// the domain, and each app of a name two apps take.
func (c *Catalog) HostNames(config json.RawMessage) (map[string]string, []schema.Problem) {
	var cfg struct {
		Domain string `json:"domain"`
		Apps   map[string]struct {
			Enable  bool            `json:"enable"`
			Options json.RawMessage `json:"options"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(config, &cfg); err != nil {
		return nil, []schema.Problem{{Location: "", Message: "The configuration is not a JSON object: send one"}}
	}
	hosts := map[string]string{}
	takenBy := map[string][]string{} // relative name → the apps taking it
	locations := map[string]string{}
	var problems []schema.Problem
	for _, a := range c.apps {
		opt, marked := c.hostNames[a.Name]
		ac, listed := cfg.Apps[a.Name]
		if !marked || !listed || !ac.Enable {
			continue
		}
		location := "/apps/" + a.Name + "/options" + opt.pointer
		var options map[string]any
		if err := json.Unmarshal(ac.Options, &options); err != nil {
			continue // Check reports options that are not an object
		}
		v, _ := pointerGet(options, opt.pointer)
		name, ok := v.(string)
		switch {
		case !ok:
			continue // Check reports a missing value or one of another type
		case !relativeName.MatchString(name):
			problems = append(problems, schema.Problem{Location: location, Message: opt.title +
				" must be a name under the deployment's domain: labels of 1 to 63 lower case letters, digits and inner hyphens, joined by dots, such as feeds"})
			continue
		case ReservedHostName(name):
			problems = append(problems, schema.Problem{Location: location, Message: opt.title +
				" is the name of the deployment's own sign-in (https://auth.<domain>/): choose another"})
			continue
		case len(name)+1+len(cfg.Domain) > MaxHostName:
			problems = append(problems, schema.Problem{Location: location, Message: fmt.Sprintf(
				"%s with the domain is longer than %d characters: choose a shorter one", opt.title, MaxHostName)})
			continue
		}
		hosts[a.Name] = name + "." + cfg.Domain
		takenBy[name] = append(takenBy[name], a.Name)
		locations[a.Name] = location
	}
	for name, apps := range takenBy {
		if len(apps) < 2 {
			continue
		}
		for _, a := range apps {
			problems = append(problems, schema.Problem{Location: locations[a], Message: fmt.Sprintf(
				"Host name %s is taken by another app of this deployment: choose another", name)})
			delete(hosts, a)
		}
	}
	sort.Slice(problems, func(i, j int) bool { return problems[i].Location < problems[j].Location })
	return hosts, problems
}

// reservedHostNames are the names under a deployment's domain that no app takes: auth is
// where the deployment's OpenID provider answers (https://auth.<domain>/, issue 13).
var reservedHostNames = []string{"auth"}

// ReservedHostName reports whether name is kept from apps.
func ReservedHostName(name string) bool {
	for _, r := range reservedHostNames {
		if name == r {
			return true
		}
	}
	return false
}
