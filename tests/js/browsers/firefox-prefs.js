// Firefox preferences that keep a test profile on 127.0.0.1: every proxied request goes to the
// recording sink (sink.js) instead of the network, and the background services that would make
// such requests (remote settings, captive-portal and connectivity checks, telemetry, updates,
// Safe Browsing, DNS-over-HTTPS, prefetching, …) are switched off. puppeteer-core and Firefox's
// remote agent add their own automation defaults on top; these are the ones we rely on, stated
// here so a change in either does not quietly let the browser out.

/** @param {number} sinkPort the port of the recording sink on 127.0.0.1 */
export function firefoxPrefs(sinkPort) {
  return {
    // All traffic through the sink (HTTP, HTTPS via CONNECT, SOCKS), except the test servers.
    'network.proxy.type': 1,
    'network.proxy.http': '127.0.0.1',
    'network.proxy.http_port': sinkPort,
    'network.proxy.ssl': '127.0.0.1',
    'network.proxy.ssl_port': sinkPort,
    'network.proxy.socks': '127.0.0.1',
    'network.proxy.socks_port': sinkPort,
    'network.proxy.socks_remote_dns': true,
    'network.proxy.no_proxies_on': '127.0.0.1',
    'network.proxy.allow_hijacking_localhost': false,
    // A proxy that refuses must not make Firefox try the destination directly.
    'network.proxy.failover_direct': false,
    // No name resolution of its own: no DoH, no prefetch, no speculative connections.
    'network.trr.mode': 5,
    'network.dns.disablePrefetch': true,
    'network.dns.disablePrefetchFromHTTPS': true,
    'network.prefetch-next': false,
    'network.predictor.enabled': false,
    'network.http.speculative-parallel-limit': 0,
    'browser.urlbar.speculativeConnect.enabled': false,
    // Background checks and services.
    'network.captive-portal-service.enabled': false,
    'network.connectivity-service.enabled': false,
    'services.settings.server': 'data:,#remote-settings-disabled/v1',
    'app.normandy.enabled': false,
    'app.normandy.api_url': '',
    'app.shield.optoutstudies.enabled': false,
    'messaging-system.rsexperimentloader.enabled': false,
    'app.update.disabledForTesting': true,
    'app.update.auto': false,
    'app.update.checkInstallTime': false,
    'extensions.update.enabled': false,
    'extensions.systemAddon.update.enabled': false,
    'extensions.blocklist.enabled': false,
    'extensions.getAddons.cache.enabled': false,
    'browser.search.update': false,
    'browser.region.network.url': '',
    'browser.region.update.enabled': false,
    'geo.provider.network.url': '',
    'browser.safebrowsing.malware.enabled': false,
    'browser.safebrowsing.phishing.enabled': false,
    'browser.safebrowsing.downloads.enabled': false,
    'browser.safebrowsing.downloads.remote.enabled': false,
    'browser.safebrowsing.blockedURIs.enabled': false,
    'browser.safebrowsing.provider.mozilla.updateURL': '',
    'browser.safebrowsing.provider.google4.updateURL': '',
    'security.OCSP.enabled': 0,
    'security.remote_settings.crlite_filters.enabled': false,
    'security.remote_settings.intermediates.enabled': false,
    'media.gmp-manager.url': '',
    'media.gmp-provider.enabled': false,
    'identity.fxaccounts.enabled': false,
    'doh-rollout.disable-heuristics': true,
    // Telemetry and data reporting.
    'toolkit.telemetry.enabled': false,
    'toolkit.telemetry.unified': false,
    'toolkit.telemetry.archive.enabled': false,
    'toolkit.telemetry.server': '',
    'datareporting.policy.dataSubmissionEnabled': false,
    'datareporting.healthreport.uploadEnabled': false,
    'browser.ping-centre.telemetry': false,
    'browser.newtabpage.activity-stream.feeds.telemetry': false,
    'browser.newtabpage.activity-stream.telemetry': false,
    // Nothing fetched for new tabs or the start page.
    'browser.startup.page': 0,
    'browser.startup.homepage': 'about:blank',
    'browser.newtabpage.enabled': false,
    'browser.newtabpage.activity-stream.feeds.topsites': false,
    'browser.newtabpage.activity-stream.feeds.section.topstories': false,
    'browser.topsites.contile.enabled': false,
    'browser.aboutwelcome.enabled': false,
  };
}
