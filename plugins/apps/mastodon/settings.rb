# Applies the operator's server settings from fedhost at every start: the configuration
# is the authority, an edit in the administration pages lasts until the next start.
Setting.site_title = ENV.fetch('FEDHOST_SITE_TITLE')
Setting.site_short_description = ENV.fetch('FEDHOST_SITE_DESCRIPTION')
Setting.site_contact_email = ENV.fetch('FEDHOST_CONTACT_EMAIL')
Setting.registrations_mode = ENV.fetch('FEDHOST_REGISTRATIONS_MODE')
